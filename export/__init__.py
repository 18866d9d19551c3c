"""A trained run out of codelm: `python -m export.hf` writes it in Hugging Face format (export/hf.py)."""
