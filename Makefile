# Presk: the commands a user types are `make tutorial` and `make test`; every target that
# needs the environment depends on `setup`, which installs uv where it is missing.
SHELL := /bin/bash
UV ?= $(shell command -v uv 2>/dev/null || echo "$(HOME)/.local/bin/uv")
PY := .venv/bin/python
TREE_SITTER ?= ../shared/tools/tree-sitter

EXAMPLES := tests/examples/mlp/mlp.psk tests/examples/minigpt/minigpt.psk \
	tests/examples/minigpt/train_minigpt.psk tests/examples/bert/bert.psk tests/examples/llama/llama.psk \
	tests/examples/vae/vae.psk tests/examples/gru/gru.psk

.PHONY: setup venv test tutorial grammar fuzz bench lint check-examples run-examples train-examples \
	export-examples conformance sanitize opt-examples calibrate serve-examples serve-pt corpus-data corpus \
	corpus-gpt experiment-gpt pytorch-baseline bench-gpt bench-attention bench-top-k bench-epilogue bench-rows bench-serve \
	packages dist explain explain-pdf c-conformance \
	c-speed step-table j-step step-train quant-table precision curve calibrate-ra4 ra4-small plan-check ra4-quick ra4-mid statement-p \
	bench-plan bench-threads

setup:
	@command -v uv >/dev/null 2>&1 || test -x "$(UV)" || python3 -m pip install --user --quiet uv
	@$(UV) sync --frozen --all-packages --quiet

# Bytecode is written (an environment's PYTHONDONTWRITEBYTECODE dropped): without it every
# `presk` a test runs compiles presk's modules again and `import torch` takes 3.6 s, not 1.9,
# and each worker rewrites the tests' asserts anew (tools/bench_startup.py measures it).
test: setup
	env -u PYTHONDONTWRITEBYTECODE $(PY) -m pytest -q -n 2 --dist loadfile --no-loadscope-reorder --durations=25

# Each package alone (tools/packages.py, docs/development.md "Releasing a package"): a fresh
# environment a package under build/packages/ with only it, its declared dependencies and its
# test group, running its own tests; then `make dist`. Not in `make test` (several minutes).
packages: setup
	UV="$(UV)" $(PY) tools/packages.py test
	UV="$(UV)" $(PY) tools/packages.py dist

# uv build --all-packages into build/dist/ (each wheel built from its sdist), then each wheel
# installed alone with its Presk dependencies' wheels, its stage program run on 01_linear.psk.
dist: setup
	UV="$(UV)" $(PY) tools/packages.py dist

tutorial: setup
	@if [ -f ../shared/data/civil.md ]; then $(PY) tools/run_tutorial.py docs/tutorial.md; else \
	    echo "tutorial: ../shared/data/civil.md is absent: step 13 left out"; \
	    $(PY) tools/run_tutorial.py docs/tutorial.md --skip-step 13.; fi

# Regenerate the parser after a change of grammar.js (needs a tree-sitter CLI >= 0.22 and node).
grammar:
	cd packages/presk-syntax/grammar && $(abspath $(TREE_SITTER)) generate --no-bindings
	$(UV) sync --all-packages --quiet

# The fuzzer of issues 16 and 27 (tools/fuzz.py): 10,000 seeded inputs per surface (mutated
# programs, corrupted data files, garbage stage documents, extreme flags, native runs and a
# damaged cache, presk serve, --opt --profile, every document kind, every flag's values),
# internal errors and hangs counted by class; `make fuzz FUZZ_SURFACE=serve` runs one.
# Not in `make test`, which runs short seeded runs (tests/tools/test_fuzz.py).
FUZZ_INPUTS ?= 10000
FUZZ_SURFACE ?= all
fuzz: setup
	$(PY) tools/fuzz.py --surface $(FUZZ_SURFACE) --inputs $(FUZZ_INPUTS) --seed 0 --jobs 2

bench: setup
	$(PY) tools/bench_startup.py
	$(PY) tools/bench_parse.py
	$(PY) tools/bench_check.py
	$(PY) tools/bench_mpfr.py
	$(PY) tools/bench_run.py
	$(PY) tools/bench_train.py
	$(PY) tools/bench_gemm.py
	$(PY) tools/bench_gemm.py --shapes step --clock cpu
	$(PY) tools/bench_native.py
	$(PY) tools/bench_minigpt.py
	$(PY) tools/bench_opt.py
	$(PY) tools/bench_serve.py
	@$(MAKE) --no-print-directory bench-gpt

# A GEMM with its bias as its epilogue against the GEMM then the bias apart, at the course
# GPT's products at D 192 (4096 rows), interleaved (issue 26, presk_kernel.epilogue).
bench-epilogue:
	$(PY) tools/bench_epilogue.py

# The course GPT's row kernels (a norm's folds and their neighbours) fused against apart,
# each launch on the CPU clock (issue 26, presk_kernel.rows).
bench-rows: corpus-data
	@if [ ! -f $(GPT_DATA) ]; then echo "bench-rows: no $(GPT_DATA) (make corpus-data)"; exit 0; fi; \
	$(PY) tools/bench_rows.py --const D=192

# Causal attention alone (tutorial/03's attend at the course's width, T 256), natively with
# and without narrowing (issue 26) against PyTorch's sdpa and eager, interleaved.
bench-attention:
	@for t in 1 2; do $(PY) tools/bench_attention.py --threads $$t; done

# top_k's selection kernel natively against torch.topk, interleaved (issue 29).
bench-top-k:
	$(PY) tools/bench_top_k.py
	$(PY) tools/bench_top_k.py --N 4096 --K 8 --B 4

# The course GPT's training step and forward pass at reduced width (D = 192, its six blocks,
# B 16, T 256; f32) natively against PyTorch eager, sdpa and torch.compile, interleaved,
# at one and two threads (tools/pytorch_baseline.py; a few minutes): `make pytorch-baseline`
# is the full size.
bench-gpt: corpus-data
	@if [ ! -f $(GPT_DATA) ]; then echo "bench-gpt: no $(GPT_DATA) (make corpus-data)"; exit 0; fi; \
	set -e; for t in 1 2; do \
	    $(PY) tools/pytorch_baseline.py --const D=192 --repeat 3 --no-f64 --threads $$t; done

# Where the second thread is idle in the course GPT's step (D = 192, f32): each launch's CPU
# time on each thread at one and two threads, by class, the bound two threads allow, the
# launches that leave most on the table, an empty region's cost; then the step at one and
# two threads natively and in PyTorch (sdpa), interleaved; what two threads give here to work
# in registers and to a stream, the ceiling a step is read against (tools/bench_threads.py).
bench-threads: corpus-data
	@if [ ! -f $(GPT_DATA) ]; then echo "bench-threads: no $(GPT_DATA) (make corpus-data)"; exit 0; fi; \
	$(PY) tools/bench_threads.py --const D=192 --steps 3 --regions --wall 3 --ceiling 15

# The course GPT's training step at reduced width (D = 192; f32) natively under a layout
# plan beside its default layouts and PyTorch's sides, in one run (docs/plans.md, "The
# course GPT's step under a plan"): the model calibrated on the GEMM at N 64 and 128 and its
# GEMM statement timed at the step's products (BENCH_PLAN_GEMMS, --space gemm), the step
# planned (presk plan --train), tools/pytorch_baseline.py --plan at BENCH_PLAN_THREADS.
BENCH_PLAN_PROFILE ?= out/bench_plan_layout.json
BENCH_PLAN ?= out/bench_plan.json
BENCH_PLAN_THREADS ?= 2
# The step's products at D 192 (M×K×N, its batch folded into M), whose GEMM statement is
# timed on one worker and on two (--space gemm) so that the plan's worker counts are measured.
BENCH_PLAN_GEMMS ?= 4096x192x192 192x4096x192 192x4096x768 192x4096x86 4096x768x192 \
	4096x192x86 4096x192x768 768x4096x192 4096x86x192
bench-plan: corpus-data
	@if [ ! -f $(GPT_DATA) ]; then echo "bench-plan: no $(GPT_DATA) (make corpus-data)"; exit 0; fi; \
	set -e; mkdir -p out; rm -f $(BENCH_PLAN_PROFILE); \
	for n in 64 128; do .venv/bin/presk bench experiments/gemm.psk --entry gemm --dim N=$$n \
	    --realize f32 --space calib --repeat 5 --calibrate $(BENCH_PLAN_PROFILE) > /dev/null; done; \
	for mkn in $(BENCH_PLAN_GEMMS); do set -- $$(echo $$mkn | tr x ' '); \
	    .venv/bin/presk bench experiments/gemm.psk --entry thin --dim M=$$1 --dim K=$$2 \
	    --dim N=$$3 --realize f32 --space gemm --repeat 11 --calibrate $(BENCH_PLAN_PROFILE) \
	    | sed -n '4,5p'; done; \
	.venv/bin/presk plan $(GPT) --train --const D=192 --realize f32 \
	    --profile $(BENCH_PLAN_PROFILE) --out $(BENCH_PLAN) > $(BENCH_PLAN).txt; \
	tail -3 $(BENCH_PLAN).txt; \
	$(PY) tools/pytorch_baseline.py --const D=192 --repeat 3 --no-f64 --no-breakdown \
	    --threads $(BENCH_PLAN_THREADS) --plan $(BENCH_PLAN)

# presk-cback's tests and tests/native's entries (the course of fused kernels) with every
# object compiled under AddressSanitizer and UBSan, its alignment check named (PRESK_SANITIZE,
# read by presk_core.cc.toolchain), their runtimes preloaded into Python.
sanitize: setup
	PRESK_SANITIZE=address,undefined,alignment \
	ASAN_OPTIONS=detect_leaks=0:verify_asan_link_order=0 \
	UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	LD_PRELOAD="$$(cc -print-file-name=libasan.so) $$(cc -print-file-name=libubsan.so)" \
	    $(PY) -m pytest -q -p no:cacheprovider packages/presk-cback/tests tests/native

# The reference examples on the interpreter, at constants it can afford.
run-examples: setup
	.venv/bin/presk run tests/examples/minigpt/minigpt.psk --entry MiniGPT.apply \
	    --const V=64 --const D=16 --const H=2 --const L=2 --dim B=2 --dim T=8
	.venv/bin/presk run tests/examples/minigpt/train_minigpt.psk --entry loss \
	    --const V=64 --const D=16 --const H=2 --const L=2 --dim B=2 --dim T=8
	.venv/bin/presk run tests/examples/mlp/mlp.psk --entry mse --dim D=3 --dim B=2
	.venv/bin/presk run tests/examples/bert/bert.psk --entry MaskedLM.apply \
	    --const V=32 --const D=8 --const H=2 --const L=2 --dim B=1 --dim T=4 --digits 4
	.venv/bin/presk run tests/examples/llama/llama.psk --entry block \
	    --const D=8 --const H=2 --const F=12 --dim B=1 --dim T=3 --digits 4

# presk check on the reference programs: no error (mlp's two W0001 aside).
check-examples: setup
	@for f in $(EXAMPLES); do echo "presk check $$f"; .venv/bin/presk check $$f || exit 1; done

lint: setup
	$(UV) run ruff check . && $(UV) run ruff format --check .

# presk train on the tutorial's linear regression of a tower (100 steps) and on tiny MiniGPT
# (20 steps on tiny windows), on the reference interpreter (about two minutes); then the
# same runs exported (train.py) and run in PyTorch.
train-examples: setup
	.venv/bin/presk train tutorial/07_train.psk --steps 100 --log-every 20 --ckpt out/tutorial_ckpt
	.venv/bin/presk train tests/examples/minigpt/train_minigpt.psk --const V=64 --const D=16 \
	    --const H=2 --const L=2 --data tests/examples/minigpt/data/tiny_T8.psk.d --steps 20 \
	    --log-every 5 --ckpt out/tiny_minigpt_ckpt
	.venv/bin/presk train tests/examples/conv1d/conv1d.psk --log-every 2 \
	    --ckpt out/conv1d_interp_ckpt | grep '^step' > out/conv1d_interp.log
	.venv/bin/presk train tests/examples/conv1d/conv1d.psk --backend native --log-every 2 \
	    --ckpt out/conv1d_ckpt | grep '^step' > out/conv1d_native.log
	diff out/conv1d_interp.log out/conv1d_native.log && echo "conv1d: the native log is the interpreter's"
	.venv/bin/presk train tests/examples/gru/gru.psk --log-every 8 \
	    --ckpt out/gru_interp_ckpt | grep '^step' > out/gru_interp.log
	.venv/bin/presk train tests/examples/gru/gru.psk --backend native --log-every 8 \
	    --ckpt out/gru_ckpt | grep '^step' > out/gru_native.log
	diff out/gru_interp.log out/gru_native.log && echo "gru: the native log is the interpreter's"
	$(EXPORT) tutorial/07_train.psk --conformance-entry train:10 -o out/export/train
	cd out/export/train && ../../../$(PY) train.py --steps 100 --log-every 25 --ckpt ckpt
	$(EXPORT) tests/examples/minigpt/train_minigpt.psk --const V=64 --const D=16 --const H=2 \
	    --const L=2 --data tests/examples/minigpt/data/tiny_T8.psk.d \
	    --conformance-entry train:2 -o out/export/minigpt_train
	cd out/export/minigpt_train && ../../../$(PY) train.py --steps 20 --log-every 5 --ckpt ckpt
	.venv/bin/presk train tests/examples/vae/vae.psk --steps 40 --log-every 10 \
	    --ckpt out/vae_ckpt | grep '^step' > out/vae_interp.log
	.venv/bin/presk train tests/examples/vae/vae.psk --steps 40 --log-every 10 --backend native \
	    --ckpt out/vae_native_ckpt | grep '^step' > out/vae_native.log
	diff out/vae_interp.log out/vae_native.log && echo "vae: the native log is the interpreter's"

# .venv with PyTorch, NumPy and pytest (the workspace's dev group): what the exported
# programs and their conformance tests need. `make setup` makes the same environment.
venv: setup

TINY_GPT := --const V=64 --const D=16 --const H=2 --const L=2 --dim B=2 --dim T=8
EXPORT := .venv/bin/presk export --target pytorch --mode readable

# The exports of step 8 and of the reference examples at tiny constants, each with its
# conformance test, under out/export/.
export-examples: setup
	$(EXPORT) tutorial/06_tower.psk --shapes=check --conformance-entry Tower.apply \
	    --dim batch=2 -o out/export/tower
	$(EXPORT) tutorial/04_grad.psk --conformance-entry loss_grad --dim D=3 --dim B=2 \
	    -o out/export/grad
	$(EXPORT) tests/examples/mlp/mlp.psk --shapes=check --conformance-entry mse_grad \
	    --dim D=3 --dim B=2 -o out/export/mlp
	$(EXPORT) tests/examples/minigpt/minigpt.psk --shapes=check \
	    --conformance-entry MiniGPT.apply $(TINY_GPT) -o out/export/minigpt_apply
	$(EXPORT) tests/examples/minigpt/train_minigpt.psk --shapes=check \
	    --conformance-entry loss $(TINY_GPT) -o out/export/minigpt_loss
	$(EXPORT) tests/examples/bert/bert.psk --shapes=check --const V=32 --const D=8 \
	    --const H=2 --const L=2 --conformance-entry MaskedLM.apply --dim B=1 --dim T=4 \
	    -o out/export/bert
	$(EXPORT) tests/examples/llama/llama.psk --shapes=check --const D=8 --const H=2 \
	    --const F=12 --conformance-entry block --dim B=1 --dim T=3 -o out/export/llama
	$(EXPORT) tests/examples/gru/gru.psk --shapes=check --conformance-entry train:2 \
	    -o out/export/gru_train
	$(EXPORT) tutorial/07_train.psk --conformance-entry train:10 -o out/export/train
	$(EXPORT) tests/examples/minigpt/train_minigpt.psk --const V=64 --const D=16 --const H=2 \
	    --const L=2 --data tests/examples/minigpt/data/tiny_T8.psk.d \
	    --conformance-entry train:2 -o out/export/minigpt_train

# The exports, then their test_conformance.py in .venv.
conformance: export-examples
	@for d in out/export/*/; do echo "== $$d"; \
	    (cd $$d && ../../../$(PY) -m pytest -q -p no:cacheprovider test_conformance.py) || exit 1; done

# presk serve on the tiny MiniGPT's checkpoint (trained as train-examples does when it is
# missing): greedy tokens identical on the reference interpreter, the kernel interpreter
# and native f64, with the cache and without it (a prompt within the window: 3 characters,
# 12 tokens, the window sliding after 5); then the --serve export (docs/serve.md).
SERVE_TINY := --const V=64 --const D=16 --const H=2 --const L=2
SERVE_CKPT := out/tiny_minigpt_ckpt/final.psk.d
SERVE_ARGS := --prompt "Presk serves " --tokens 24 --temperature 0
SERVE_SHORT := --prompt "Pre" --tokens 12 --temperature 0

$(SERVE_CKPT):
	.venv/bin/presk train tests/examples/minigpt/train_minigpt.psk $(SERVE_TINY) \
	    --data tests/examples/minigpt/data/tiny_T8.psk.d --steps 20 --log-every 5 \
	    --ckpt out/tiny_minigpt_ckpt

serve-examples: setup $(SERVE_CKPT)
	@mkdir -p out/serve
	@for b in interp kernel native; do \
	    .venv/bin/presk serve tests/examples/minigpt/minigpt.psk $(SERVE_TINY) $(SERVE_ARGS) \
	        --backend $$b > out/serve/$$b.txt || exit 1; done
	@cmp out/serve/interp.txt out/serve/kernel.txt && cmp out/serve/interp.txt out/serve/native.txt
	@echo "serve-examples: the same greedy tokens on interp, kernel and native f64: $$(cat out/serve/native.txt)"
	@for b in interp kernel native; do for c in --cache --no-cache; do \
	    .venv/bin/presk serve tests/examples/minigpt/minigpt.psk $(SERVE_TINY) $(SERVE_SHORT) \
	        --backend $$b $$c > out/serve/short_$$b$$c.txt || exit 1; \
	    cmp out/serve/short_interp--cache.txt out/serve/short_$$b$$c.txt || exit 1; done; done
	@echo "serve-examples: with the cache and without, the same greedy tokens: $$(cat out/serve/short_native--cache.txt)"
	$(EXPORT) tests/examples/minigpt/minigpt.psk $(SERVE_TINY) --serve -o out/export/minigpt_serve

# The exported serve.py (float64, greedy) against presk serve's tokens from the same weights:
# the whole window (a prompt beyond it), then within the window with serve.py's cache of keys
# and values and without it.
serve-pt: serve-examples
	cd out/export/minigpt_serve && ../../../$(PY) serve.py $(SERVE_ARGS) > ../../serve/pt.txt
	@cmp out/serve/native.txt out/serve/pt.txt
	@echo "serve-pt: serve.py's greedy tokens are presk serve's: $$(cat out/serve/pt.txt)"
	@for c in "" --no-cache; do (cd out/export/minigpt_serve && ../../../$(PY) serve.py \
	    $(SERVE_SHORT) $$c > ../../serve/pt_short.txt) || exit 1; \
	    cmp out/serve/short_native--cache.txt out/serve/pt_short.txt || exit 1; done
	@echo "serve-pt: with its cache and without, serve.py's tokens are presk serve's: $$(cat out/serve/pt_short.txt)"

# Generation speed (docs/serve.md): tokens a second of the course GPT (corpus/nlp/05_gpt.psk,
# its trained weights, else drawn at their shapes) natively with the cache and without it,
# and serve.py's PyTorch loops with a cache and without, one thread, in turn, f32; then two
# threads. BENCH_SERVE_ARGS adds flags (`--const D=192` for a reduced width).
BENCH_SERVE_ARGS ?=
bench-serve: setup
	$(PY) tools/bench_serve.py --tokens 32 --pairs 3 --threads 1 $(BENCH_SERVE_ARGS)
	$(PY) tools/bench_serve.py --tokens 32 --pairs 3 --threads 2 $(BENCH_SERVE_ARGS)

# The NLP course's ladder on the French civil code (docs/corpus.md): the data from
# ../shared/data/civil.md into corpus/nlp/data/ (the specification's three commands, then
# the bigrams' pairs and the MLP's contexts, written last); without the text, or with data
# newer than the text and this file, one line and nothing done.
CIVIL := ../shared/data/civil.md
NLP_DATA := corpus/nlp/data
CORPUS_V := 86
corpus-data: setup
	@if [ ! -f $(CIVIL) ]; then echo "corpus-data: $(CIVIL) is absent: no corpus data (see docs/corpus.md)"; exit 0; fi; \
	if [ $(NLP_DATA)/context3.psk.d -nt $(CIVIL) ] && [ $(NLP_DATA)/context3.psk.d -nt Makefile ]; then \
	    echo "corpus-data: $(NLP_DATA)/ is newer than the text and the Makefile (rm -r it to remake it)"; exit 0; fi; \
	set -e; mkdir -p $(NLP_DATA); \
	.venv/bin/presk data chars $(CIVIL) -o $(NLP_DATA)/civil_vocab.json; \
	.venv/bin/presk data encode $(CIVIL) --vocab $(NLP_DATA)/civil_vocab.json -o $(NLP_DATA)/civil_tokens.txt; \
	.venv/bin/presk data lm-windows --vocab $(CORPUS_V) --seq 256 $(NLP_DATA)/civil_tokens.txt -o $(NLP_DATA)/civil_T256.psk.d; \
	.venv/bin/presk data lm-windows --vocab $(CORPUS_V) --seq 32 $(NLP_DATA)/civil_tokens.txt -o $(NLP_DATA)/civil_T32.psk.d; \
	.venv/bin/presk data ngrams --vocab $(CORPUS_V) --context 1 --limit 10000 $(NLP_DATA)/civil_tokens.txt -o $(NLP_DATA)/bigrams.psk.d; \
	.venv/bin/presk data ngrams --vocab $(CORPUS_V) --context 3 $(NLP_DATA)/civil_tokens.txt -o $(NLP_DATA)/context3.psk.d

# Every rung of the ladder to its check (tools/corpus_ladder.py), natively in f32.
corpus: corpus-data
	$(PY) tools/corpus_ladder.py

# The course GPT (corpus/nlp/05_gpt.psk, docs/corpus.md): its training run as the checker
# reads it, then GPT_STEPS steps natively in f32 (GPT_STEPS= trains the whole epoch, 264).
GPT := corpus/nlp/05_gpt.psk
GPT_DATA := $(NLP_DATA)/civil_T256.psk.d
GPT_STEPS ?= 20
THREADS ?= 1
corpus-gpt: corpus-data
	@if [ ! -f $(GPT_DATA) ]; then echo "corpus-gpt: no $(GPT_DATA) (make corpus-data)"; exit 0; fi; \
	set -e; .venv/bin/presk check $(GPT) --summary | sed -n '/^training run:/,$$p'; \
	.venv/bin/presk train $(GPT) --backend native --realize f32 --threads $(THREADS) \
	    $(if $(GPT_STEPS),--steps $(GPT_STEPS)) --log-every 5

# Step 15 at the course's scale (tools/precision_gpt.py, docs/precision.md "At course
# scale"): the course GPT at a width the exact interpreter affords, trained PRECISION_STEPS
# natively in f32, then its loss's envelope, bounds, sensitivities (one reverse sweep) and a
# realization solved under PRECISION_BUDGET, into out/precision_gpt/. Not a test.
PRECISION_CONSTS ?= D=32,H=2,L=2
PRECISION_STEPS ?= 200
PRECISION_BUDGET ?= 1e-3
precision: corpus-data
	@if [ ! -f $(CIVIL) ]; then echo "precision: $(CIVIL) is absent: nothing done"; exit 0; fi; \
	$(PY) tools/precision_gpt.py --consts $(PRECISION_CONSTS) --steps $(PRECISION_STEPS) \
	    --budget $(PRECISION_BUDGET)

# The ε-to-quality curve (tools/precision_curve.py): CURVE_BUDGETS each solved on the loss
# and trained CURVE_STEPS from scratch at a reduced width, beside all-f64, f32 and bf16; a
# table and out/curve/curve.png. Not a test.
CURVE_CONSTS ?= D=16,H=2,L=1
CURVE_BUDGETS ?= 1e-1,1e-2,1e-3,1e-5
CURVE_STEPS ?= 300
curve: corpus-data
	@if [ ! -f $(CIVIL) ]; then echo "curve: $(CIVIL) is absent: nothing done"; exit 0; fi; \
	$(PY) tools/precision_curve.py --consts $(CURVE_CONSTS) --budgets $(CURVE_BUDGETS) \
	    --steps $(CURVE_STEPS)

# The course GPT trained natively (f32) and by its exported train.py from the same θ₀ and
# batches, EXPERIMENT_STEPS steps each: metrics, loss gaps and curves in corpus/nlp/ckpt/.
EXPERIMENT_STEPS ?= 50
experiment-gpt: corpus-data
	@if [ ! -f $(GPT_DATA) ]; then echo "experiment-gpt: no $(GPT_DATA) (make corpus-data)"; exit 0; fi; \
	$(PY) tools/experiment_gpt.py --steps $(EXPERIMENT_STEPS) --threads $(THREADS)

# The course GPT's training step under a budget (spec L847, step 16; docs/precision.md, "The
# training step's budget"): presk calibrate --step under f64, f32, bf16 and the recipe, then
# presk solve --step, the table as printed. Scaled to finish in minutes on 2 cores: width
# STEP_CONSTS, windows of 32 characters, a measured batch of STEP_SAMPLES, STEP_WARMUP
# native f64 steps first (the schedule's warm-up: the peak rate).
STEP_CONSTS ?= --const D=32 --const H=2 --const L=2
STEP_DATA := $(NLP_DATA)/civil_T32.psk.d
STEP_WARMUP ?= 100
STEP_SAMPLES ?= 4
STEP_BUDGET ?= 1e-3
step-table: corpus-data
	@if [ ! -f $(STEP_DATA) ]; then echo "step-table: no $(STEP_DATA) (make corpus-data)"; exit 0; fi; \
	set -e; mkdir -p out; \
	.venv/bin/presk calibrate --step $(GPT) $(STEP_CONSTS) --data $(STEP_DATA) \
	    --warmup $(STEP_WARMUP) --samples $(STEP_SAMPLES) \
	    --realize f64 --realize f32 --realize bf16 --realize recipe --out out/gpt_step.json; \
	.venv/bin/presk solve --step $(GPT) $(STEP_CONSTS) --precision out/gpt_step.json \
	    --budget $(STEP_BUDGET) --out out/gpt_step_solved.json

# Statement J′ (spec L847, L1003; tools/step_budget_gpt.py): the course GPT's step solved
# under STEP_BUDGET (STEP_PROFILE=P: by that profile's predicted seconds), its update gap
# measured again from the same state, and the step timed natively under all-f64 and under
# the solved realization, interleaved: faster and inside the budget? Scaled as step-table.
J_CONSTS ?= D=32,H=2,L=2
J_ROUNDS ?= 3
STEP_PROFILE ?=
j-step: corpus-data
	@if [ ! -f $(STEP_DATA) ]; then echo "j-step: no $(STEP_DATA) (make corpus-data)"; exit 0; fi; \
	$(PY) tools/step_budget_gpt.py j-step --consts $(J_CONSTS) --warmup $(STEP_WARMUP) \
	    --samples $(STEP_SAMPLES) --budget $(STEP_BUDGET) --rounds $(J_ROUNDS) \
	    $(if $(STEP_PROFILE),--profile $(STEP_PROFILE))

# The trajectory under a solved step (spec L978–L1001): STEP_TRAIN_STEPS steps natively under
# the solved realization, under all-f64, and under all-f64 from seed 1; `presk data diff`
# of each against the f64 run's weights (tools/step_budget_gpt.py).
STEP_TRAIN_STEPS ?= 100
step-train: corpus-data
	@if [ ! -f $(STEP_DATA) ]; then echo "step-train: no $(STEP_DATA) (make corpus-data)"; exit 0; fi; \
	$(PY) tools/step_budget_gpt.py step-train --consts $(J_CONSTS) --warmup $(STEP_WARMUP) \
	    --samples $(STEP_SAMPLES) --budget $(STEP_BUDGET) --train-steps $(STEP_TRAIN_STEPS) \
	    $(if $(STEP_PROFILE),--profile $(STEP_PROFILE))

# Integer weights (spec L847; tools/quant_table.py): the course GPT's loss at QUANT_CONSTS,
# every parameter int8 then int4 under an f32 and a bf16 default, the gap in its two parts
# (presk quantize, the integers in the kernels natively) and the bytes at rest.
QUANT_CONSTS ?= D=16,H=2,L=1
quant-table: corpus-data
	@if [ ! -f $(STEP_DATA) ]; then echo "quant-table: no $(STEP_DATA) (make corpus-data)"; exit 0; fi; \
	$(PY) tools/quant_table.py --consts $(QUANT_CONSTS)

# One training step and one forward pass of the course GPT, natively (f32, f64) and in
# PyTorch eager, interleaved, with peak memory and compile times (tools/pytorch_baseline.py).
pytorch-baseline: corpus-data
	@if [ ! -f $(GPT_DATA) ]; then echo "pytorch-baseline: no $(GPT_DATA) (make corpus-data)"; exit 0; fi; \
	$(PY) tools/pytorch_baseline.py --threads $(THREADS)

# The e-graph optimizer's report on every example, and the same printed outputs without and
# with --opt, on the reference interpreter and natively (tools/opt_examples.py).
opt-examples: setup
	$(PY) tools/opt_examples.py

# A plan stating every nest's default layout lowers every example entry to the same kernels,
# byte for byte (L851; docs/plans.md, "--plan").
plan-check: setup
	$(PY) tools/plan_check.py

# presk bench --calibrate on the tiny MiniGPT's entries (its forward pass and its loss, at
# two sizes), natively in f64, into one profile; then the entries timed natively without and
# with --opt priced by that profile (docs/optimizer.md, "The roofline").
MINIGPT_CONSTS := --const V=64 --const D=16 --const H=2 --const L=2
CALIBRATE_PROFILE := out/minigpt_profile.json
calibrate: setup
	@mkdir -p out && rm -f $(CALIBRATE_PROFILE)
	.venv/bin/presk bench tests/examples/minigpt/minigpt.psk --entry MiniGPT.apply \
	    $(MINIGPT_CONSTS) --dim B=2 --dim T=8 --repeat 21 --calibrate $(CALIBRATE_PROFILE)
	.venv/bin/presk bench tests/examples/minigpt/minigpt.psk --entry MiniGPT.apply \
	    $(MINIGPT_CONSTS) --dim B=8 --dim T=32 --repeat 21 --calibrate $(CALIBRATE_PROFILE)
	.venv/bin/presk bench tests/examples/minigpt/train_minigpt.psk --entry loss \
	    $(MINIGPT_CONSTS) --dim B=2 --dim T=8 --repeat 21 --calibrate $(CALIBRATE_PROFILE)
	.venv/bin/presk bench tests/examples/minigpt/train_minigpt.psk --entry loss \
	    $(MINIGPT_CONSTS) --dim B=8 --dim T=32 --repeat 21 --calibrate $(CALIBRATE_PROFILE)
	.venv/bin/presk bench tests/examples/minigpt/minigpt.psk --entry MiniGPT.apply \
	    $(MINIGPT_CONSTS) --dim B=8 --dim T=32 --repeat 21 --opt --profile $(CALIBRATE_PROFILE)
	.venv/bin/presk bench tests/examples/minigpt/train_minigpt.psk --entry loss \
	    $(MINIGPT_CONSTS) --dim B=8 --dim T=32 --repeat 21 --opt --profile $(CALIBRATE_PROFILE)

# `presk explain` of the tutorial's training loss (step 15's entry) under a budget and a layout
# profile calibrated on a small GEMM (step 17), as a page, and its screenshots for docs/explain.md (Debian's chromium: `apt-get install chromium`).
explain: setup
	@mkdir -p out && rm -f out/explain_layout.json
	$(PY) -m presk_cli.main bench experiments/gemm.psk --entry gemm --dim N=64 --realize f32 \
	    --calibrate out/explain_layout.json --space calib --repeat 3 > /dev/null
	$(PY) -m presk_cli.main explain tutorial/07_train.psk --entry loss --dim B=4 --budget 1e-6 \
	    --profile out/explain_layout.json --out out/explain_loss --format html
	@if command -v chromium >/dev/null 2>&1; then \
	    $(PY) tools/screenshot.py out/explain_loss/explain.html docs/explain.png \
	        --click '.el.kernel' && \
	    $(PY) tools/screenshot.py out/explain_loss/explain.html docs/explain-network.png \
	        --tab network --click '#expand-all'; \
	else echo "explain: no chromium (apt-get install chromium): no screenshot"; fi

# explain.md of `make explain` as a PDF: Python-Markdown (installed here, for this target
# alone) and Debian's chromium through Playwright, which renders the listings' Unicode.
explain-pdf: explain
	$(UV) run --no-project --python $(PY) --with markdown python tools/md_pdf.py \
	    out/explain_loss/explain.md out/explain_loss/explain.pdf

# The C export outside the suite (tools/c_conformance.py): every case in f64 and f32, on one
# thread and two, built by every compiler found with and without OpenMP, C1 checked; each
# case's SCoP nests checked and shown to Polly. c-speed: the exported course GPT's forward
# pass timed against the native backend, interleaved.
c-conformance: setup
	$(PY) tools/c_conformance.py conformance

c-speed: setup
	$(PY) tools/c_conformance.py speed
# Step 17 (docs/plans.md): the layout cost model calibrated on a GEMM at four sizes and on two
# thin products, in f32 and f64, pinned to like cores (RA4_CPUS, with taskset where there is
# one), into one profile; then the course GPT's attention at B 16, T 256 swept twice on
# --space small (presk autotune, day 1 checked on the kernel interpreter) and ranked.
RA4_PROFILE ?= out/ra4_layout.json
RA4_DAYS ?= out/ra4_small
RA4_CPUS ?= 0-$(shell echo $$(( $$(nproc) - 1 )))
RA4_PIN := $(if $(shell command -v taskset 2>/dev/null),taskset -c $(RA4_CPUS))
RA4_BENCH := $(RA4_PIN) .venv/bin/presk bench experiments/gemm.psk --space calib --repeat 5 \
	--calibrate $(RA4_PROFILE)
RA4_ENTRY := SelfAttention.apply
calibrate-ra4: setup
	@mkdir -p out && rm -f $(RA4_PROFILE)
	set -e; for t in f32 f64; do \
	    for n in 128 256 384 512; do $(RA4_BENCH) --entry gemm --dim N=$$n --realize $$t; done; \
	    $(RA4_BENCH) --entry thin --dim M=16 --dim K=512 --dim N=512 --realize $$t; \
	    $(RA4_BENCH) --entry thin --dim M=1024 --dim K=64 --dim N=256 --realize $$t; \
	done

ra4-small: setup
	@if [ ! -f $(RA4_PROFILE) ]; then echo "ra4-small: no $(RA4_PROFILE) (make calibrate-ra4)"; exit 1; fi
	@mkdir -p $(RA4_DAYS)
	$(RA4_PIN) .venv/bin/presk autotune $(GPT) --entry $(RA4_ENTRY) --dim B=16 --dim T=256 \
	    --realize f32 --space small --profile $(RA4_PROFILE) --interp --out $(RA4_DAYS)/day1
	$(RA4_PIN) .venv/bin/presk autotune $(GPT) --entry $(RA4_ENTRY) --dim B=16 --dim T=256 \
	    --realize f32 --space small --profile $(RA4_PROFILE) --out $(RA4_DAYS)/day2
	.venv/bin/presk rank $(RA4_DAYS)/day1 $(RA4_DAYS)/day2 --entry $(RA4_ENTRY) \
	    --out $(RA4_DAYS)/rank.md

# ra4-mid's and ra4-quick's recipe: $(1) the profile, $(2) the days' folder, $(3) the sizes,
# $(4) the seconds between the days, $(5) what filters each calibration's output (or nothing).
# The GEMM calibrated at N 64 and 128 (f32) into the profile, then the course GPT's attention
# swept twice on --space small (day 1 checked on the kernel interpreter) and ranked.
define RA4_TWO_DAYS
	@mkdir -p $(2) && rm -f $(1) && rm -rf $(2)/day1 $(2)/day2
	set -e; for n in 64 128; do .venv/bin/presk bench experiments/gemm.psk --entry gemm \
	    --dim N=$$n --realize f32 --space calib --repeat 5 --calibrate $(1) $(5); done
	.venv/bin/presk autotune $(GPT) --entry $(RA4_ENTRY) $(3) --realize f32 \
	    --space small --profile $(1) --interp --out $(2)/day1
	sleep $(4)
	.venv/bin/presk autotune $(GPT) --entry $(RA4_ENTRY) $(3) --realize f32 \
	    --space small --profile $(1) --out $(2)/day2
	.venv/bin/presk rank $(2)/day1 $(2)/day2 --entry $(RA4_ENTRY) --out $(2)/rank.md
endef

# Between ra4-quick and ra4-small (issue 23, H5): the model calibrated on the GEMM at N 64 and
# 128 (f32), the course GPT's attention at the step's width D 192 (heads of 32), B 2, T 64,
# swept twice on --space small (day 1 checked on the kernel interpreter), ranked.
RA4M_PROFILE ?= out/ra4m_layout.json
RA4M_DAYS ?= out/ra4_mid
RA4M_GAP ?= 30
RA4M_DIMS := --const D=192 --dim B=2 --dim T=64
ra4-mid: setup
	$(call RA4_TWO_DAYS,$(RA4M_PROFILE),$(RA4M_DAYS),$(RA4M_DIMS),$(RA4M_GAP),| tail -1)

# Statement P at N 1024 in f32 without the whole sweep (hours here): the GEMM statement's
# points against the 0.6.0 default, interleaved; a lower bound of P (tools/statement_p.py).
statement-p: setup
	$(PY) tools/statement_p.py --n 1024 --realize f32 --rounds 3

# ra4-small reduced to run in minutes on a loaded two-core machine: the model calibrated on
# the GEMM at N 64 and 128 (f32), the course GPT's attention at D 96, B 4, T 64 swept twice on
# --space small (day 1 checked on the kernel interpreter), RA4Q_GAP seconds apart, ranked.
RA4Q_PROFILE ?= out/ra4q_layout.json
RA4Q_DAYS ?= out/ra4_quick
RA4Q_GAP ?= 120
RA4Q_DIMS := --const D=96 --dim B=4 --dim T=64
ra4-quick: setup
	$(call RA4_TWO_DAYS,$(RA4Q_PROFILE),$(RA4Q_DAYS),$(RA4Q_DIMS),$(RA4Q_GAP))