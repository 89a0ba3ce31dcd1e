import sys

from workbench.interfaces.cli import main

sys.exit(main())
