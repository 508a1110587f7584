// The ELMo part of every task config, written once, and the knobs every task shares.
//
// Every knob of tasks/knobs.py is read here with std.extVar (AllenNLP passes the environment as external
// variables; importing the `tasks` package sets the defaults). A task config does
//     local elmo = import 'elmo.libsonnet';
// and uses the helpers below. Paths are relative to the repository root: run allennlp from there.
//
// Constraint: jsonnet cannot read the biLM options file (importstr takes literal paths only), so the ELMo vector
// size is not known here. Encoders that take ELMo at the input get their input size through `input_sized`
// (Python wrapper tasks/elmo_input_sized.py reads the options file); models that we write (SQuAD) size their
// layers from text_field_embedder.get_output_dim() / encoder.get_output_dim().

local knob(name) = std.extVar(name);
local number(name) = std.parseJson(knob(name));
local placement = knob('ELMO');
local mix = knob('ELMO_MIX');
local size = knob('SIZE');
local layer_norm = knob('ELMO_LAYER_NORM');

local word_vectors = knob('WORD_VECTORS');
// ENCODER: 'elmo' (the biLM of ELMO_OPTIONS/ELMO_WEIGHTS) or a Hugging Face transformer (a save_pretrained directory,
// or hf:NAME) used the ELMo way: frozen, every hidden state mixed (elmo_module/transformer.py). The ELMO_* knobs of
// placement, mix, lambda, layer norm and precision apply to it as to the biLM.
local encoder = knob('ENCODER');
local transformer = encoder != 'elmo';
// Every knob's values are checked by tasks/knobs.py (RULES, knob_problems: the one place the rules live), under
// `allennlp` when it loads tasks.allennlp_plugin and in the runner before any run: no second copy here.

local orDefault(value, default) = if value == '' then default else value;

{
  // Parsed knob values.
  knobs: {
    elmo: placement,
    mix: mix,
    lambda: number('ELMO_LAMBDA'),
    layer_norm: layer_norm == 'true',
    encoder: encoder,
    pooling: knob('ENCODER_POOLING'),
    options_file: orDefault(knob('ELMO_OPTIONS'), 'elmo_module/bundled/tiny_options.json'),
    weight_file: orDefault(knob('ELMO_WEIGHTS'), 'elmo_module/bundled/tiny_weights.hdf5'),
    cache: knob('ELMO_CACHE'),
    precision: knob('ELMO_PRECISION'),
    seed: number('SEED'),
    train_fraction: number('TRAIN_FRACTION'),
    train_path: knob('TRAIN_PATH'),
    dev_path: knob('DEV_PATH'),
    test_path: knob('TEST_PATH'),
    glove_path: knob('GLOVE_PATH'),
    word_vectors: word_vectors == 'true',
    size: size,
    num_epochs: knob('NUM_EPOCHS'),
    batches_per_epoch: knob('BATCHES_PER_EPOCH'),
    cuda_device: number('CUDA_DEVICE'),
    wandb: knob('WANDB') == 'true',
  },

  use_elmo: placement != 'none',
  elmo_at_input: placement == 'input' || placement == 'both',
  elmo_at_output: placement == 'output' || placement == 'both',

  // The key of the ELMo entry in token indexers and token embedders. Not "elmo": BCN pops a "elmo" key for its
  // native ELMo, and our embedder must go through the text field embedder like every other task.
  key: 'elmo_module',

  // SIZE picks one of three sizes: the paper's, a small one and a tiny one for CPU runs and tests.
  size(paper, small, tiny): { paper: paper, small: small, tiny: tiny }[size],

  // The task's data path, or its bundled sample in the real format when the knob is empty.
  train_path(default): orDefault(knob('TRAIN_PATH'), default),
  dev_path(default): orDefault(knob('DEV_PATH'), default),
  test_path(default): orDefault(knob('TEST_PATH'), default),

  num_epochs(default): if knob('NUM_EPOCHS') == '' then default else std.parseJson(knob('NUM_EPOCHS')),

  // Token indexers of a text field, plus the ELMo character indexer when ELMo is on. sentences: the biLM runs on
  // each sentence of the text alone (the reader numbers them; coref, as e2e-coref's cache_elmo.py).
  // A transformer encoder reads word pieces with each word's offsets (allennlp's mismatched indexer), a text whole.
  indexers(base, sentences=false): base + (if self.use_elmo && transformer then {
    [$.key]: { type: 'transformer_pieces', encoder: encoder },
  } else if self.use_elmo then {
    [$.key]: { type: 'elmo_module_characters' } + (if sentences then { sentences: true } else {}),
  } else {}),

  // Token embedders, plus ELMo (one biLM pass; one scalar mix per placement, paper Sec. 3.2-3.3).
  // dropout: on the ELMo vector (allennlp-models' task configs: 0.5; SRL 0.1).
  embedders(base, dropout=0.5): base + (if self.use_elmo && transformer then {
    [$.key]: {
      type: 'transformer_mix',
      encoder: encoder,
      pooling: $.knobs.pooling,  // ENCODER_POOLING: a word's first word piece, or the mean of its pieces
      placement: placement,
      mix: mix,
      do_layer_norm: $.knobs.layer_norm,
      dropout: dropout,
      precision: $.knobs.precision,
      cache_dir: $.knobs.cache,  // the runner's activation cache of the pooled layers ('' = run the transformer)
    },
  } else if self.use_elmo then {
    [$.key]: {
      type: 'elmo_module',
      options_file: $.knobs.options_file,
      weight_file: $.knobs.weight_file,
      placement: placement,
      mix: mix,
      do_layer_norm: $.knobs.layer_norm,  // ELMO_LAYER_NORM; false in allennlp-models' configs and document-qa
      dropout: dropout,
      cache_dir: $.knobs.cache,  // the runner's frozen-biLM activation cache ('' = run the biLM)
      precision: $.knobs.precision,  // ELMO_PRECISION: float32 | bfloat16 (the cache must have been built in it)
    },
  } else {}),

  // A word embedding: GloVe (GLOVE_PATH, the file's dimension glove_dim) as the paper's baselines, or trained from
  // scratch (scratch_dim) when no GloVe file is given (GloVe is not obtainable offline).
  // WORD_VECTORS=false: a zero-width embedding, so the token representation is ELMo alone and every input size
  // computed from embedding_dim stays right (the supplement's "ELMo without GloVe" ablation).
  word_embedding(glove_dim, scratch_dim, glove_trainable=false):
    if !$.knobs.word_vectors then {
      type: 'embedding',
      embedding_dim: 0,
      trainable: false,
    } else if $.knobs.glove_path != '' then {
      type: 'embedding',
      embedding_dim: glove_dim,
      pretrained_file: $.knobs.glove_path,
      trainable: glove_trainable,
    } else {
      type: 'embedding',
      embedding_dim: scratch_dim,
      trainable: true,
    },

  // An encoder whose input is the token representation [x_k; ELMo_k]. input_dim is the size without ELMo;
  // with ELMo at the input, tasks/elmo_input_sized.py adds the ELMo size read from the options file.
  // input_dim_key: the encoder's name of its input size ("input_size" for lstm/gru, "input_dim" for others).
  // (the size added is the biLM's [forward; backward] projection, or the transformer's hidden size)
  sized_by: if transformer then encoder else $.knobs.options_file,
  input_sized(encoder, input_dim, input_dim_key='input_size'):
    if self.elmo_at_input then {
      type: 'elmo_input_sized',
      encoder: encoder,
      input_dim: input_dim,
      options_file: $.sized_by,
      input_dim_key: input_dim_key,
    } else encoder { [input_dim_key]: input_dim },

  // The task RNN with output ELMo appended, [h_k; ELMo'_k] (paper Sec. 3.3), when placement is output or both.
  output_encoder(encoder):
    if self.elmo_at_output then {
      type: 'elmo_output',
      encoder: encoder,
      options_file: $.sized_by,
    } else encoder,

  // lambda * sum(w^2) on the softmax-weight parameters of every mix (paper Sec. 3.2), only for the weighted mix.
  regularizer:
    if self.use_elmo && mix == 'weighted' && $.knobs.lambda > 0 then {
      regexes: [['mix_weights', { type: 'l2', alpha: $.knobs.lambda }]],
    } else null,

  // Model fields every task model gets (merge into the model object).
  model_common: if self.regularizer != null then { regularizer: $.regularizer } else {},
  // model_common with more regularizer entries ([regex, regularizer] pairs, after the lambda one), for a task's
  // own weight penalties (SNLI's ELMo model).
  model_common_plus(regexes):
    local all = (if self.regularizer != null then self.regularizer.regexes else []) + regexes;
    if std.length(all) > 0 then { regularizer: { regexes: all } } else {},

  // Trainer callbacks: the learned mix weights (Figure 2) when ELMo is on; W&B logging when WANDB=true; every
  // run's per-example dev and test predictions for the significance tests (tasks/predictions.py); the random
  // generators' states in every checkpoint, so that a resumed run goes on as if never stopped
  // (tasks/checkpoint_loading.py).
  // TASK_PRECISION=bfloat16: the trainer's forward passes under bfloat16 autocast (tasks/task_precision.py); absent in
  // float32, so a float32 run's config is the one it was before the knob.
  callbacks: [{ type: 'unit_predictions' }, { type: 'random_state' }]
             + (if self.use_elmo then [{ type: 'elmo_mix_weights' }] else [])
             + (if knob('TASK_PRECISION') == 'bfloat16' then [{ type: 'task_precision', precision: 'bfloat16' }] else [])
             + (if knob('WANDB') == 'true' then [$.wandb_callback] else []),
  // allennlp's wandb callback (works with WANDB_MODE=offline).
  wandb_callback: { type: 'wandb', summary_interval: 10, should_log_parameter_statistics: false },

  // The trainer parts that every task shares, merged under the task's own trainer settings.
  trainer(base, default_epochs): base + {
    num_epochs: $.num_epochs(default_epochs),
    cuda_device: $.knobs.cuda_device,
    callbacks+: $.callbacks,
  },

  // Seeds of python random, numpy and torch (one SEED knob).
  seeds: {
    random_seed: $.knobs.seed,
    numpy_seed: $.knobs.seed,
    pytorch_seed: $.knobs.seed,
  },

  // The training reader, wrapped in a seeded random subsample when TRAIN_FRACTION < 1 (Figure 1);
  // the validation reader is always the plain one (validation_reader, when a task reads dev differently).
  dataset_readers(reader, validation_reader=null): {
    dataset_reader:
      if $.knobs.train_fraction < 1 then {
        type: 'random_subsample',
        reader: reader,
        fraction: $.knobs.train_fraction,
        seed: $.knobs.seed,
      } else reader,
    validation_dataset_reader: if validation_reader == null then reader else validation_reader,
  },

  // Top-level fields of a task config: seeds, readers, data paths. The vocabulary comes from every dataset read
  // (allennlp's default, as allennlp-models' configs): a small training fraction can miss labels that dev has.
  experiment(reader, train, dev, test='', validation_reader=null):
    $.seeds + $.dataset_readers(reader, validation_reader) + {
    train_data_path: $.train_path(train),
    validation_data_path: $.dev_path(dev),
  } + (if $.test_path(test) != '' then {
    test_data_path: $.test_path(test),
    evaluate_on_test: true,
  } else {}) + (if $.knobs.batches_per_epoch != '' then {
    // BATCHES_PER_EPOCH: an epoch of N training batches (the configs extend data_loader with `data_loader+:`).
    // allennlp builds the validation loader from data_loader's settings unless given one: dev is always read whole.
    data_loader+: { batches_per_epoch: std.parseJson($.knobs.batches_per_epoch) },
    validation_data_loader: std.mergePatch(self.data_loader, { batches_per_epoch: null }),
  } else {}),
}
