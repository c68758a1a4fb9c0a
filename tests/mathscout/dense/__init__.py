"""Tests of mathscout.dense: the bi-encoder, ColBERT-style retrieval and the cross-encoder."""
