"""The MathScout chat page (Gradio): `mathscout serve` builds it with `mathscout.ui.app.build_app`."""
