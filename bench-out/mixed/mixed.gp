set terminal pngcairo size 1100,1600 font ',10'
set output 'bench-out/mixed/mixed.png'
set datafile separator ','
set key autotitle columnhead outside right
set grid
set multiplot layout 4,1 title 'mixed'
set ylabel 'operations/s'
set yrange [0:*]
plot 'bench-out/mixed/mixed-leveled.csv' using 't_s':'ops_per_s' with lines lw 2 title 'leveled', \
     'bench-out/mixed/mixed-leveldb.csv' using 't_s':'ops_per_s' with lines lw 2 title 'leveldb', \
     'bench-out/mixed/mixed-rocksdb.csv' using 't_s':'ops_per_s' with lines lw 2 title 'rocksdb', \
     'bench-out/mixed/mixed-bitcask.csv' using 't_s':'ops_per_s' with lines lw 2 title 'bitcask'
set ylabel 'update p99, ms'
set yrange [0:*]
plot 'bench-out/mixed/mixed-leveled.csv' using 't_s':'put_p99_ms' with lines lw 2 title 'leveled', \
     'bench-out/mixed/mixed-leveldb.csv' using 't_s':'put_p99_ms' with lines lw 2 title 'leveldb', \
     'bench-out/mixed/mixed-rocksdb.csv' using 't_s':'put_p99_ms' with lines lw 2 title 'rocksdb', \
     'bench-out/mixed/mixed-bitcask.csv' using 't_s':'put_p99_ms' with lines lw 2 title 'bitcask'
set ylabel 'GET p99, ms'
set yrange [0:*]
plot 'bench-out/mixed/mixed-leveled.csv' using 't_s':'get_p99_ms' with lines lw 2 title 'leveled', \
     'bench-out/mixed/mixed-leveldb.csv' using 't_s':'get_p99_ms' with lines lw 2 title 'leveldb', \
     'bench-out/mixed/mixed-rocksdb.csv' using 't_s':'get_p99_ms' with lines lw 2 title 'rocksdb', \
     'bench-out/mixed/mixed-bitcask.csv' using 't_s':'get_p99_ms' with lines lw 2 title 'bitcask'
set xlabel 'time, s'
set ylabel '2i range p99, ms'
set yrange [0:*]
plot 'bench-out/mixed/mixed-leveled.csv' using 't_s':'query_p99_ms' with lines lw 2 title 'leveled', \
     'bench-out/mixed/mixed-leveldb.csv' using 't_s':'query_p99_ms' with lines lw 2 title 'leveldb', \
     'bench-out/mixed/mixed-rocksdb.csv' using 't_s':'query_p99_ms' with lines lw 2 title 'rocksdb', \
     'bench-out/mixed/mixed-bitcask.csv' using 't_s':'query_p99_ms' with lines lw 2 title 'bitcask'
unset multiplot
