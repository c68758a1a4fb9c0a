"""Tests of mathscout.evaluation (evaluation/): topics, runs, measures, trainers, reproductions."""
