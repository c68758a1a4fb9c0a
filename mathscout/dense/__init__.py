"""Dense retrieval: the sentence encoder (model.py), passage encoding (encoder.py), faiss indexes
(faiss_index.py), the dense/colbert index components, and contrastive fine-tuning (train.py)."""
