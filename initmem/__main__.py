import sys

from initmem.cli import main

sys.exit(main())
