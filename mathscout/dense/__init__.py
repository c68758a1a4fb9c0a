"""Dense retrieval engine: the sentence encoder (model.py), passage and query encoding (encoder.py, with the
query-side adapter of query_adapter.py) and the dense/ColBERT vectors of an index (build.py). Fine-tuning
lives in `mathscout.evaluation.training`."""
