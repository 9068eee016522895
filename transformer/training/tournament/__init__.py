"""Trade-offs, measured: every claim the lecture makes about an axis, trained and read with error bars.

One recipe (the same width, steps, tokens and batch for every entry of a comparison), several seeds per
entry, held-out bits per character on the English corpus the language checkpoints use:

    from transformer.training.tournament.run import Recipe, base_config, train_run
    recipe = Recipe()                                    # d_model 64, 2 layers, 4 heads, crops of 128, batch 16
    run = train_run(base_config(recipe), recipe, seed=0)
    run["held_out_bits_per_char"], run["curve"], run["processor_seconds"], run["diverged"]

    python -m scripts.tournament                          # every comparison; writes assets/measurements/tournament.json

Each comparison is data (`comparisons.COMPARISONS`): its axis, the lecture's claim, its entries (config changes,
and a learning rate or warm-up of their own where the comparison is about those), the cost it is plotted against,
and a function that reads the measured numbers into a one-line verdict. The JSON is the only thing the page
and the README read; scripts/tournament.py renders the README's table from it.

    run.py          the harness: Recipe, base_config, train_run, held_out_bits, forward_ms
    statistics.py   the numbers read: Stats, entry_stats, separated, and each comparison's verdict
    comparisons.py  the comparisons: Entry, Comparison, COMPARISONS
    document.py     the JSON: new_document, finish, load, comparison, summary_rows

Each imports only those above it.
"""
