"""What the text and vision recipes share: the trainer skeleton, argument groups, config, runs, Hub upload."""
