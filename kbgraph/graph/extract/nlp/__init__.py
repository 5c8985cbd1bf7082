"""The LLM-free extractor ("nlp"): extractor.py, built from name finding (detect.py over names.py
and chinese.py), sentences (sentences.py) and co-occurrence relations (relations.py)."""
