*
w1hostad"hosta:1(Bhosta:1*j,
w2hostbd"hostb:1(Bhostb:1*j0"¯
º	{
  "name": "j",
  "seed": 1,
  "model": {
    "input_shape": [
      4
    ],
    "layers": [
      {
        "type": "dense",
        "name": "dense",
        "units": 2,
        "activation": "linear",
        "use_bias": true
      }
    ]
  },
  "loss": "sparse_categorical_crossentropy",
  "optimizer": {
    "type": "adam",
    "learning_rate": 0.001,
    "beta_1": 0.9,
    "beta_2": 0.999,
    "epsilon": 1e-07,
    "weight_decay": 0.0
  },
  "lr_schedule": {
    "type": "constant",
    "warmup_steps": 0
  },
  "data": {
    "format": "synthetic",
    "train_samples": 100,
    "test_samples": 10,
    "seed": 1234,
    "scale": 1.0,
    "shuffle": true,
    "num_classes": 2
  },
  "batch_size_per_replica": 10,
  "epochs": 1,
  "checkpoint": {
    "every_steps": 0,
    "keep": 3
  },
  "summary": {
    "every_steps": 100
  },
  "cluster": {
    "workers": 2,
    "replicas_per_worker": 1,
    "collective": "ring",
    "bucket_kib": 1024,
    "ring_chunk_kib": 4096,
    "ring_streams": 0,
    "compression": "none",
    "fingerprint_every_steps": 1