"""The MathScout chat page (Gradio): `mathscout serve` builds it with `ui.app.build_app`."""
