"""``python -m attnviz``: the command line (``attnviz.cli``). May import: attnviz.cli."""

import sys

from attnviz.cli import main

sys.exit(main())
