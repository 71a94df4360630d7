"""Static files of the browser chat page, served by ``gateway/routes/ui.py``.

A package only so that wheels carry the files (package data needs a package).
"""
