"""The training data: corpus, vocabulary, languages, SeqIO tasks, mixtures (natural, UniMax), packed batches."""
