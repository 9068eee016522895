"""Trade-offs, measured: claims about the axes, trained with several seeds and judged by one stated rule.

One recipe per comparison (the same width, steps, tokens and batch for every entry of it: the shared recipe, with a
comparison's own steps or repeated spans where it names them), several seeds per entry, held-out bits per character
on the English corpus the language checkpoints use:

    from transformer.training.tournament.run import Recipe, base_config, train_run
    recipe = Recipe()                                    # d_model 64, 2 layers, 4 heads, untied, crops of 128
    run = train_run(base_config(recipe), recipe, seed=0)
    run["held_out_bits_per_char"], run["curve"], run["processor_seconds"], run["diverged"]

    python -m scripts.tournament                          # every comparison; writes assets/measurements/tournament.json
    python -m scripts.tournament --rewrite                # an older file's runs, judged again in today's shape

Each comparison is data (`comparisons.COMPARISONS`): its axis, the claim it tests (the lecture's words, or a paper's
or model card's claim with its source named), its entries (config changes, a learning rate or warm-up of their own
where the comparison is about those, what each is measured against, and the verdicts the claim predicts), and the
cost it is plotted against. One rule (verdict.py) reads every comparison: seed-paired differences against the
reference with a 95% t-interval, a ±1% margin fixed in advance, no verdict where an entry did not learn past the
bigram baseline. The JSON is the only thing the page and the README read; scripts/tournament.py renders the
README's table from it.

    run.py          the harness: Recipe, base_config, train_run, held_out_bits, by_length_prefixes
    verdict.py      the rule: paired, judge, claim_status, did_not_learn, needs_more_seeds, RULE_TEXT
    statistics.py   the numbers read: Stats, entry_stats
    comparisons.py  the comparisons: Claim, Entry, Comparison (each with its own recipe), COMPARISONS
    measures.py     what else is read of a trained run: recall at distance, an indexer's kept mass (MEASURES)
    judgement.py    the rule applied to one comparison's JSON: judge_comparison, seeds_wanted
    document.py     the JSON: new_document, finish, rewrite, load, comparison, summary_rows

Each imports only those above it.
"""
