"""The hook's fast way in: ``<python> -S <this file> EVENT``, the command ``ctxbus hooks install`` writes.

``-S`` skips the ``site`` module: no site-packages scan and no ``.pth`` files at start-up (the editable
install's and setuptools' ``distutils-precedence.pth`` among them), which the ``ctxbus`` console script
pays on every call. The hook client's fast path needs nothing from site-packages; the directory that holds
the ``ctxbus`` package is put first on the path here, and the slow paths that need a package (the
pattern-file fallback) add the site directories then (``ctxbus.hooks.client.site_packages``).
"""

import os
import sys

if __name__ == "__main__":
    # sys.path[0] is this file's directory (ctxbus/hooks): the one that holds the ctxbus package instead
    sys.path[0] = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from ctxbus.hooks.client import main

    sys.exit(main(sys.argv[1:]))
