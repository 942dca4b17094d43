"""The capture child's inner loop: real loads and stores on anonymous memory (``replay.replay_codes``)."""
