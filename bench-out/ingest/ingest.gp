set terminal pngcairo size 1100,800 font ',10'
set output 'bench-out/ingest/ingest.png'
set datafile separator ','
set key autotitle columnhead outside right
set grid
set multiplot layout 2,1 title 'ingest'
set ylabel 'puts/s'
set yrange [0:*]
plot 'bench-out/ingest/ingest-rocksdb.csv' using 't_s':'ops_per_s' with lines lw 2 title 'rocksdb', \
     'bench-out/ingest/ingest-leveldb.csv' using 't_s':'ops_per_s' with lines lw 2 title 'leveldb', \
     'bench-out/ingest/ingest-leveled.csv' using 't_s':'ops_per_s' with lines lw 2 title 'leveled', \
     'bench-out/ingest/ingest-bitcask.csv' using 't_s':'ops_per_s' with lines lw 2 title 'bitcask'
set xlabel 'time, s'
set ylabel 'max latency, ms'
set yrange [0:*]
plot 'bench-out/ingest/ingest-rocksdb.csv' using 't_s':'max_latency_ms' with lines lw 2 title 'rocksdb', \
     'bench-out/ingest/ingest-leveldb.csv' using 't_s':'max_latency_ms' with lines lw 2 title 'leveldb', \
     'bench-out/ingest/ingest-leveled.csv' using 't_s':'max_latency_ms' with lines lw 2 title 'leveled', \
     'bench-out/ingest/ingest-bitcask.csv' using 't_s':'max_latency_ms' with lines lw 2 title 'bitcask'
unset multiplot
