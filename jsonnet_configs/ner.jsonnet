// NER on CoNLL-2003 (paper Sec. 4, Table 1: baseline 90.15 -> ELMo 92.22 test F1).
// Model: char-CNN + word embeddings -> 2-layer biLSTM -> CRF (allennlp's crf_tagger), hyperparameters from
// allennlp-models' ner_elmo config (Adam 1e-3, clip 5, batch 64, dropout 0.5; its lambda 0.1 is set by the paper
// profile's Table 1 through the shared ELMO_LAMBDA knob). GloVe 6B 50-d as ner_elmo (the paper's Keras model used
// Senna 50-d). Every size is the same model apart from widths. See tasks/ner/README.md.
local elmo = import 'elmo.libsonnet';

local word_embedding = elmo.word_embedding(glove_dim=50, scratch_dim=elmo.size(50, 50, 8), glove_trainable=true);
local char_embedding_dim = elmo.size(16, 16, 4);
local char_filters = elmo.size(128, 32, 8);
local hidden = elmo.size(200, 64, 8);

local reader = {
  type: 'conll2003_checked',
  tag_label: 'ner',
  convert_to_coding_scheme: 'BIOUL',  // IOB1 in the files; BIOUL for the CRF (as ner_elmo)
  token_indexers: elmo.indexers({
    tokens: { type: 'single_id', lowercase_tokens: true },
    token_characters: { type: 'characters', min_padding_length: 3 },
  }),
};

elmo.experiment(reader,
                train='tasks/ner/sample_data/train.txt',
                dev='tasks/ner/sample_data/dev.txt',
                test='tasks/ner/sample_data/test.txt') + {
  model: {
    type: 'crf_tagger',
    label_encoding: 'BIOUL',
    constrain_crf_decoding: true,
    calculate_span_f1: true,
    include_start_end_transitions: false,
    dropout: 0.5,
    text_field_embedder: {
      token_embedders: elmo.embedders({
        tokens: word_embedding,
        token_characters: {
          type: 'character_encoding',
          embedding: { embedding_dim: char_embedding_dim , vocab_namespace: 'token_characters' },
          encoder: {
            type: 'cnn',
            embedding_dim: char_embedding_dim,
            num_filters: char_filters,
            ngram_filter_sizes: [3],
            conv_layer_activation: 'relu',
          },
        },
      }, dropout=0.0),  // ner_elmo: 0; crf_tagger's dropout 0.5 on the whole embedding covers ELMo
    },
    encoder: elmo.output_encoder(elmo.input_sized({
      type: 'lstm',
      hidden_size: hidden,
      num_layers: 2,
      dropout: 0.5,
      bidirectional: true,
    }, word_embedding.embedding_dim + char_filters)),
  } + elmo.model_common,
  data_loader+: {
    batch_size: elmo.size(64, 32, 4),
    // allennlp 0.x's "basic" iterator of the original ner_elmo shuffled every epoch; AllenNLP 2's data loader does
    // not unless asked (allennlp-models' ner_elmo.jsonnet:86-88 dropped it in the port)
    shuffle: true,
  },
  trainer: elmo.trainer({
    optimizer: { type: 'adam', lr: 0.001 },
    grad_norm: 5.0,
    validation_metric: '+f1-measure-overall',
    patience: 25,
  }, default_epochs=75),
}
