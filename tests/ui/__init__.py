"""Tests of mathscout.ui (ui/): the command line, services, the HTTP API and the chat page."""
