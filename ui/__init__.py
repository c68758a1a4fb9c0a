"""The Gradio chat page (`mathscout serve`): arrives with the UI issue."""
