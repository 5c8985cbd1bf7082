"""Entity and relation extraction from one chunk's text.

base.py holds what every extractor returns and the interface; finalize.py the rules all methods
share; factory.py builds the extractor a knowledge base's method names ("general"/"light": llm.py,
with glean.py deciding on gleaning and output_parser.py reading the answers; "nlp": nlp/). Import
the modules themselves: this package exports nothing, so importing one extractor loads no other.
"""
