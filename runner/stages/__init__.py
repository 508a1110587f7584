"""What runs need made first: the biLM stages, word vectors, activation caches, and their order."""
