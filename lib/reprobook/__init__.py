"""reprobook: the library behind a reproducibility book of NeurIPS 2026 papers.

``reprobook.core`` holds what every chapter uses (profiles, seeding, claims, the plotting
theme, training helpers); ``reprobook.papers.<slug>`` holds one paper's method; the runner,
the ledger and the site builder execute the chapters and render the book.
"""

__version__ = "0.1.0"
