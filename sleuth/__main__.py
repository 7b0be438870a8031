"""`python -m sleuth …` is the `sleuth` command."""

from sleuth.workers.cli import main

if __name__ == "__main__":
    main()
