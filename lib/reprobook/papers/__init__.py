"""One package per paper of the book; each imports ``reprobook.core`` and never another paper."""
