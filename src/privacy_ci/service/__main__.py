"""``python -m privacy_ci.service --db URL --jwt-key-file F [--host H] [--port N]``."""

from privacy_ci.service._run import main

main()
