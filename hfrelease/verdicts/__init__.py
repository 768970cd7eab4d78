"""What a measurement is judged to be, below every package that judges or reports it.

`verdict` the gate verdict (void / reference / no-reference / pass / fail) of one recorded result against the
reference's, `comparison` the paired bootstrap it rests on (is an artifact no worse than its reference, on the
same samples, by a stated margin), `seeds` a sampled gate's runs, one per seed, judged together, and `severity`
what each verdict implies (its exit code, whether it blocks a publish, whether its reason is shown, the one
order). Eval, speed, the release decision, `publish`'s gate check, the CI summaries, the views and the cards
read them here; none reaches into another of them for a verdict.
"""
