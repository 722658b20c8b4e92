"""``python -m colcep.cli``: the ``colcep`` command."""
import sys

from colcep.cli import main

sys.exit(main())
