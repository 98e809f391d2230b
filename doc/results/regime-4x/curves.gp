set datafile separator ','
set key outside right noenhanced
set grid
set ylabel 'validation CE (nats/byte)'
set terminal pngcairo size 1200,650
set output 'curves_steps.png.9258.tmp'
set xlabel 'steps'
set title 'mean over 3 seeds, band = min..max'
unset arrow
set arrow from 6944, graph 0 to 6944, graph 1 nohead dt 2 lc 'gray'
set arrow from 13888, graph 0 to 13888, graph 1 nohead dt 2 lc 'gray'
plot 
set terminal pngcairo size 1200,650
set output 'curves_active_layer_tokens.png.9258.tmp'
set xlabel 'active-layer tokens'
set title 'mean over 3 seeds, band = min..max'
unset arrow
plot 
set terminal svg size 1200,650
set output 'curves_steps.svg.9258.tmp'
set xlabel 'steps'
set title 'mean over 3 seeds, band = min..max'
unset arrow
set arrow from 6944, graph 0 to 6944, graph 1 nohead dt 2 lc 'gray'
set arrow from 13888, graph 0 to 13888, graph 1 nohead dt 2 lc 'gray'
plot 
set terminal svg size 1200,650
set output 'curves_active_layer_tokens.svg.9258.tmp'
set xlabel 'active-layer tokens'
set title 'mean over 3 seeds, band = min..max'
unset arrow
plot 
unset output
