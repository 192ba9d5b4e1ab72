"""Files byoc reads and writes, handled so that no user's file is lost and no read is unbounded.

- ``outputs``: every file and folder a command writes (``extract -o``, ``partition -o``,
  ``--trace``, ``--emit-c``...): never over a user's file, never half written.
- ``reading``: a path opened only if it is a regular file (no FIFO that blocks forever, no
  ``/dev/zero`` read until memory runs out), its size checked before reading.
- ``arrays``: ``.npy`` and ``.npz`` inputs, their headers checked against the file's size and
  byoc's allocation limit before anything is allocated.
- ``scratch``: the names of byoc's temporary files and folders, and the clean-up of those a
  killed process left behind.
"""
