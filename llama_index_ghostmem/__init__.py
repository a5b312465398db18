"""LlamaIndex tools, retrievers and chat store over ghostmem."""
