# Kernel NN (Lei et al., ICML 2017) in PyTorch. `make help` lists the targets.
# Every target except help runs inside .venv and first makes sure it is set up.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
# Touched after each install, so pip runs again only when pyproject.toml or
# constraints.txt (the exact versions the results were made with) is newer.
STAMP  := $(VENV)/.installed-pyproject

# Minutes of training (-> train.max_minutes); empty: the full protocol.
BUDGET ?=
# Evaluation batch size: the authors' 1 for full runs, 10 (much faster) for budgeted ones.
EVAL_BATCH ?= $(if $(BUDGET),10,1)
# Extra Hydra overrides, e.g. ARGS="device=cpu seed=1".
ARGS ?=
PTB_RUN := outputs/ptb/knn_lm/gated_5m/$(shell date +%Y-%m-%d_%H-%M-%S)

# reproduce-sst: the seeds and the experiments (conf/experiment/sst/<name>) to run: every
# Table 2 row we have, 12 experiments x 5 seeds = 60 runs (the Kernel NN first; the
# baselines both in this harness's training and on their own papers' protocols); e.g.
# SST_VARIANTS="gated_fine gated_binary" for the gated rows alone.
SEEDS ?= 0 1 2 3 4
SST_VARIANTS ?= gated_fine gated_binary const_fine const_binary kim_cnn_fine kim_cnn_binary \
	bilstm_fine bilstm_binary kim_cnn_kim2014_fine kim_cnn_kim2014_binary \
	bilstm_tai2015_fine bilstm_tai2015_binary
SST_TABLE ?= experiments/results/sst/table2
# Run folders, <variant>/seed<N>/ below one folder per invocation (fixed once per make).
ifeq ($(origin SST_RUNS),undefined)
SST_RUNS := outputs/sst/reproduce/$(shell date +%Y-%m-%d_%H-%M-%S)
endif
SST_RUN_RESULTS := $(foreach v,$(SST_VARIANTS),$(foreach s,$(SEEDS),$(SST_RUNS)/$(v)/seed$(s)/result.json))

.DEFAULT_GOAL := help
.PHONY: help setup test bench reproduce-ptb reproduce-sst reproduce-cep report nightly peer-chemprop

help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-z-]+:.*## / {printf "  %-15s %s\n", $$1, $$2}' $(MAKEFILE_LIST)
	@echo "  variables: BUDGET=<minutes> (reproduce-*), EVAL_BATCH=<n>, ARGS=\"<hydra overrides>\","
	@echo "             SEEDS=\"0 1 2 3 4\", SST_VARIANTS=\"gated_fine ...\", SST_RUNS=<dir>, SST_TABLE=<prefix> (reproduce-sst)"
	@echo "             CEP_VARIANTS=\"mean wl_kernel ...\", CEP_RUNS=<dir>, CEP_TABLE=<prefix>, CEP_THREADS=1 (reproduce-cep)"
	@echo "             RESULTS=<dir>, REPORT=<dir> (report), EXPECTED=<yaml>, NIGHTLY_OUT=<dir> (nightly)"
	@echo "             RECORD=1 (bench: write experiments/bench/layers.json, the committed measurement)"
	@echo "             SEED=<n>, EPOCHS=<n> (not 50: result under outputs/), OUT=<dir>, THREADS=<n> (peer-chemprop)"

setup: $(STAMP) ## create .venv and install the package, pinned by constraints.txt (reinstalls when either changes)

$(PY):
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml constraints.txt | $(PY)
	$(PY) -m pip install -c constraints.txt -e '.[report,slurm,test,lint]'
	@touch $(STAMP)

test: setup ## run the test suite
	$(PY) -m pytest

# bench: outputs/bench/layers.json; RECORD=1 writes the committed experiments/bench/layers.json.
RECORD ?=

bench: setup ## benchmark the layers and products (outputs/bench; RECORD=1: experiments/bench)
	$(PY) -m knn.tools.bench $(if $(RECORD),--record)

reproduce-ptb: setup ## Table 1, gated 5m: train, test ppl, result.json, result row (BUDGET=<minutes>)
	$(PY) -m knn.train experiment=ptb/gated_5m task.eval_batch_size=$(EVAL_BATCH) \
		$(if $(BUDGET),train.max_minutes=$(BUDGET)) $(ARGS) hydra.run.dir=$(PTB_RUN)
	@$(PY) -m knn.tools.summary $(PTB_RUN)

reproduce-sst: $(SST_RUN_RESULTS) ## Table 2: kernel NN gated/λ=0.5, Kim CNN, Bi-LSTM, fine/binary, SEEDS each, CPU (BUDGET=<min per run>)
	$(PY) -m knn.tools.results $(SST_RUNS) --out $(SST_TABLE) --title "Table 2 (SST): test accuracy (%)"
	$(PY) -m knn.tools.sst_table $(SST_RUNS) --out $(SST_TABLE)_judged

# One SST run; `make -j N reproduce-sst` runs N at once (then ARGS="threads=1"
# keeps them from fighting over cores). Rerunning with the same SST_RUNS
# skips finished runs and resumes interrupted ones.
$(SST_RUNS)/%/result.json: | $(STAMP)
	$(PY) -m knn.train experiment=sst/$(patsubst %/,%,$(dir $*)) seed=$(patsubst seed%,%,$(notdir $*)) \
		device=cpu $(if $(BUDGET),train.max_minutes=$(BUDGET)) $(if $(wildcard $(@D)/last.pt),train.resume=true) \
		$(ARGS) hydra.run.dir=$(@D)

# reproduce-cep: the Table 3 rows to train (conf/experiment/cep/<name>; add emf for the
# embedded mean field), one run each, CEP_THREADS torch threads per run; wln_tuned is ours,
# the WLN the factor study chose on validation.
CEP_VARIANTS ?= mean wl_kernel nfp elbp wln gated_wln wln_tuned
CEP_TABLE ?= experiments/results/cep/table3
CEP_THREADS ?= 1
ifeq ($(origin CEP_RUNS),undefined)
CEP_RUNS := outputs/cep/reproduce/$(shell date +%Y-%m-%d_%H-%M-%S)
endif

# report: the folder searched for result.json / failed.json, and where the report goes.
RESULTS ?= experiments/results
REPORT ?= experiments/report

reproduce-cep: $(foreach v,$(CEP_VARIANTS),$(CEP_RUNS)/$(v)/result.json) ## Table 3: WLN, gated WLN, NFP, ELBP, mean, WL kernel on CPU (BUDGET=<min per model>)
	$(PY) -m knn.tools.cep_table $(CEP_RUNS) --out $(CEP_TABLE)

# One CEP run. One torch thread per run: batches are small (20 molecules), and on
# shared cores two threads collapsed (WLN: 26 vs 675 molecules/s on 2 busy cores);
# `make -j 2 reproduce-cep` runs two models at once instead. Rerunning with the same
# CEP_RUNS skips finished runs and resumes interrupted ones.
$(CEP_RUNS)/%/result.json: | $(STAMP)
	$(PY) -m knn.train experiment=cep/$* device=cpu threads=$(CEP_THREADS) \
		$(if $(BUDGET),train.max_minutes=$(BUDGET)) $(if $(wildcard $(@D)/last.pt),train.resume=true) \
		$(ARGS) hydra.run.dir=$(@D)

report: setup ## Tables 1-3, Figure 2, curves, bench chart into REPORT/README.md; README.md results block
	$(PY) -m knn.tools.report --results $(RESULTS) --out $(REPORT) --readme README.md

# nightly: the checks and their bands; the run folder (default outputs/nightly/<time>).
EXPECTED ?= experiments/expected.yaml
NIGHTLY_OUT ?= outputs/nightly/$(shell date +%Y-%m-%d_%H-%M-%S)

nightly: setup ## short fixed runs + bench against experiments/expected.yaml bands; exit 1 on any failure
	$(PY) -m knn.tools.nightly --expected $(EXPECTED) --out $(NIGHTLY_OUT)

# peer-chemprop: chemprop 2.3.1's default D-MPNN on the same CEP split, in its own
# venv (experiments/peers/chemprop/README.md); system python3, not .venv.
peer-chemprop: ## chemprop D-MPNN peer on CEP -> experiments/peers/chemprop/[seed<N>/]result.json (SEED=, EPOCHS=, OUT=, THREADS=)
	$(PYTHON) experiments/peers/chemprop/run.py $(if $(SEED),--seed $(SEED)) $(if $(EPOCHS),--epochs $(EPOCHS)) $(if $(OUT),--out $(OUT)) $(if $(THREADS),--threads $(THREADS))
