"""Entry points: the `mathscout` command line (cli.py; `ask` in ask.py, `--server` through client.py), the chat
page (Gradio: app.py builds it for `mathscout serve`) and the JSON HTTP API beside it (http_api.py)."""
