"""A Sphinx extension the book's build loads (``_config.yml``: ``extra_extensions``).

sphinx-thebe and sphinx-togglebutton (loaded by Jupyter Book 1) register their inline
configuration scripts again on a later read of the sources, so a page carries them twice, and
the second ``const THEBE_JS_URL`` raises a JavaScript error in every reader's browser. This
extension drops repeated scripts from each page's list, keeping the first of each (same file,
same attributes; an inline script's file is None or '' depending on who added it).
"""

from __future__ import annotations

from typing import Any


def script_key(script: Any) -> tuple:
    filename = getattr(script, "filename", script)
    attributes = getattr(script, "attributes", {}) or {}
    return str(filename or ""), tuple(sorted((k, str(v)) for k, v in attributes.items()))


def dedupe_scripts(app, pagename, templatename, context, doctree) -> None:
    scripts = context.get("script_files")
    if not scripts:
        return
    seen, kept = set(), []
    for script in scripts:
        key = script_key(script)
        if key not in seen:
            seen.add(key)
            kept.append(script)
    scripts[:] = kept


def setup(app):
    # last: other handlers add scripts during html-page-context too
    app.connect("html-page-context", dedupe_scripts, priority=999)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
