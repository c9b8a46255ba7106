"""The embedded stack's event history on disk: every topic archived continuously, restored at start.

``layout`` (pure: file names, windows, retention, the record schema), ``files`` (Avro object container
files: append, scan, read), ``archiver`` (a group-less consumer that appends what the topics carry and
snapshots the services' committed positions) and ``restore`` (a fresh broker refilled from the archive,
timestamps and committed positions kept).
"""
