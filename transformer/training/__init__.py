"""What a model learns from: corpora, and (moving here) tasks, training and checkpoints."""
