"""Streamlit-only helpers: the one caching module (``state``) and the sidebar pickers (``pickers``)."""
