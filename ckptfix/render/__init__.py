"""One result model, one renderer per output format. Reports go to stdout; progress and
summaries to stderr."""
