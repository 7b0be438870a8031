# Tasks for people, the same steps .ci/run runs after it has set up the venv. Run inside the venv.
# Python sources only: ruff also formats code blocks inside Markdown (README examples, bench corpora).
RUFF_FORMAT = ruff format --extend-exclude '*.md'
TYPED = sleuth

.PHONY: format format-check lint typecheck test docs check

format:  ## rewrite the sources in the project's format
	$(RUFF_FORMAT) .
	ruff check --select I --fix .  # import order is formatting too

format-check:  ## fail when a source is not formatted
	$(RUFF_FORMAT) --check .

lint:  ## ruff's rules, complexity (C90) and docstrings (D) included
	ruff check .

typecheck:  ## mypy --strict over the sleuth namespace (workflows, activities and workers included)
	mypy $(TYPED)

test:  ## the whole suite; pyproject's addopts list the 15 slowest tests and the skip reasons
	pytest

docs:  ## the documentation site, warnings as errors
	@test -f mkdocs.yml || { echo "no mkdocs.yml: nothing to build" >&2; exit 1; }
	NO_MKDOCS_2_WARNING=1 mkdocs build --strict --site-dir "$$(mktemp -d)"

check: format-check lint typecheck docs test  ## what CI runs after setting up
