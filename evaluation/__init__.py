"""Evaluation harness: topic readers, run files, official (prime) measures, run comparison."""
