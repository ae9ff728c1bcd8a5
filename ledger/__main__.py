import sys

from ledger.cli.quick import main

sys.exit(main())
