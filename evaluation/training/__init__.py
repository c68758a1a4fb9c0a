"""Training code, above the engines it trains: dense fine-tuning (`mathscout train dense`: query-side adapter or
every weight) and its contrastive loss settings. The other trainers (`mathscout train fusion|structure|ranker`)
live with the evaluation harness they score with (`mathscout.evaluation`), in the same layer."""
