"""What the tests share: the command-line runner, the tiny corpus, the fake OpenAI server, the hostile-input harness."""
