"""Cached computations the pages draw from: the model and its trace, measurements, the stepper's steps."""
