"""LangChain tools, retrievers and chat history over ghostmem."""
