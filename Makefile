# Tasks for people and CI (.ci/run sets up the venv, then calls these). Run inside the venv.
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

test:  ## the whole suite, the 15 slowest tests and why each skipped test skipped
	pytest --durations=15 -rs

docs:  ## the documentation site, warnings as errors
	@test -f mkdocs.yml || { echo "no mkdocs.yml: nothing to build" >&2; exit 1; }
	mkdocs build --strict

check: format-check lint typecheck test  ## what CI runs after setting up
