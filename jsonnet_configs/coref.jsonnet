// Coreference on OntoNotes 5.0 CoNLL-2012 (paper Sec. 4, Table 1: baseline 67.2 -> ELMo 70.4 test average F1 of
// MUC, B3 and CEAF-phi4). Model: Lee et al. (2017)'s end-to-end span model (allennlp-models' `coref`, through our
// `coref_sized` which sizes the span scorers for ELMo): word + char-CNN embeddings -> 1-layer biLSTM (200 per
// direction) -> span representations (endpoints, attention head, width) -> mention pruning (spans_per_word) ->
// antecedent scoring over the max_antecedents previous spans.
// SIZE=paper follows e2e-coref's "best" experiment (experiments.conf:38-77 at commit 53c4116, the code of Lee et al.
// 2017): 250 antecedents, training documents cut to 50 sentences at a random offset, dropout 0.2 inside and after the
// LSTM, Adam 1e-3 decayed by 0.999 every 100 documents, same-speaker and genre features. SIZE small/tiny keep
// allennlp-models' choices (50 antecedents, the first 50 sentences, no LSTM dropout or metadata features, lr halving
// on plateau: CPU budget, tests). What is not matched (Turian embeddings, per-sentence LSTM, ...):
// tasks/coref/README.md.
// ELMo: input placement = [x; ELMo] into the biLSTM (the paper's best for coref); output placement = [h; ELMo'] on
// the biLSTM's output, which feeds the span endpoints.
local elmo = import 'elmo.libsonnet';

// Lee et al.: 300-d GloVe (fixed) + 8-d character embeddings, CNN with 50 filters each of widths 3, 4, 5.
local word_embedding = elmo.word_embedding(glove_dim=300, scratch_dim=elmo.size(300, 50, 8));
local char_embedding_dim = elmo.size(8, 8, 4);
local filters_per_width = elmo.size(50, 16, 4);
local char_widths = [3, 4, 5];
local hidden = elmo.size(200, 64, 8);
local feedforward_dim = elmo.size(150, 64, 8);
local feature_size = elmo.size(20, 20, 4);
local max_span_width = 10;
local paper = elmo.knobs.size == 'paper';
// e2e-coref dropout_rate 0.2 (experiments.conf:62): on the LSTM's recurrent state (util.py:167, CustomLSTMCell)
// and on its outputs (coref_model.py:170).
local lstm_dropout = 0.2;

local reader(max_sentences, random_offset=false) = {
  type: 'coref_conll2012',
  max_span_width: max_span_width,
  max_sentences: max_sentences,
  random_offset: random_offset,
  seed: elmo.knobs.seed,
  speaker_genre: paper,  // the inputs of the model's speaker and genre features
  // ELMo per sentence: e2e-coref ran the biLM on each sentence of a document (cache_elmo.py), not on the document
  token_indexers: elmo.indexers({
    tokens: { type: 'single_id', lowercase_tokens: false },
    token_characters: { type: 'characters', min_padding_length: 5 },
  }, sentences=true),
};

local scorer_feedforward = {
  num_layers: 2,
  hidden_dims: feedforward_dim,
  activations: 'relu',
  dropout: 0.2,
};

// Training documents are cut to 50 sentences (e2e-coref max_training_sentences, experiments.conf:41): at SIZE paper
// a run starting at a random sentence, drawn anew each epoch (coref_model.py:122-132); otherwise the first 50
// (allennlp-models). Dev and test documents are read whole.
elmo.experiment(reader(max_sentences=50, random_offset=paper),
                train='tasks/coref/sample_data/train',
                dev='tasks/coref/sample_data/dev',
                test='tasks/coref/sample_data/test',
                validation_reader=reader(max_sentences=null)) + {
  model: {
    type: 'coref_sized',
    text_field_embedder: {
      token_embedders: elmo.embedders({
        tokens: word_embedding,
        token_characters: {
          type: 'character_encoding',
          embedding: { embedding_dim: char_embedding_dim, vocab_namespace: 'token_characters' },
          encoder: {
            type: 'cnn',
            embedding_dim: char_embedding_dim,
            num_filters: filters_per_width,
            ngram_filter_sizes: char_widths,
            conv_layer_activation: 'relu',
          },
        },
      }, dropout=0.5),
    },
    local lstm = if paper then {
      // variational dropout on the recurrent state, as e2e-coref's CustomLSTMCell; no highway (neither has one)
      type: 'stacked_bidirectional_lstm',
      hidden_size: hidden,
      num_layers: 1,
      recurrent_dropout_probability: lstm_dropout,
      use_highway: false,
    } else {
      type: 'unpacked_lstm',  // allennlp's 'lstm' with a backward linear in the document's length (tasks/unpacked_rnn.py)
      bidirectional: true,
      hidden_size: hidden,
      num_layers: 1,
    },
    local contextual = elmo.input_sized(lstm, word_embedding.embedding_dim + filters_per_width * std.length(char_widths)),
    context_layer: elmo.output_encoder(
      if paper then { type: 'output_dropout', encoder: contextual, dropout: lstm_dropout } else contextual),
    mention_feedforward: scorer_feedforward,
    antecedent_feedforward: scorer_feedforward,
    feature_size: feature_size,
    max_span_width: max_span_width,
    spans_per_word: 0.4,
    max_antecedents: elmo.size(250, 50, 50),  // e2e-coref experiments.conf:40; memory: tasks/coref/README.md
    // same-speaker and genre embeddings in every span pair (e2e-coref use_metadata, experiments.conf:55)
    speaker_genre_features: paper,
    lexical_dropout: 0.5,
  } + elmo.model_common,
  data_loader+: {
    batch_size: 1,  // one document per batch (Lee et al.)
    shuffle: true,  // e2e-coref shuffles the training documents every pass (coref_model.py:63)
  } + (if paper then {
    // read the training files anew every epoch, so that each epoch draws new random 50-sentence runs
    max_instances_in_memory: 100000,
  } else {}),
  trainer: elmo.trainer({
    optimizer: { type: 'adam', lr: 0.001 },
    grad_norm: 5.0,
    learning_rate_scheduler:
      if paper then { type: 'staircase_exponential', decay_rate: 0.999, decay_steps: 100 }  // experiments.conf:64-66
      else { type: 'reduce_on_plateau_compat', factor: 0.5, mode: 'max', patience: 2 },  // allennlp-models coref.jsonnet
    validation_metric: '+coref_f1',
    patience: 10,
  }, default_epochs=150),
}
