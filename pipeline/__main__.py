"""`python -m pipeline <snapshot|audit|synth> ...` (see `pipeline.cli`)."""

import sys

from pipeline.cli import main

sys.exit(main())
